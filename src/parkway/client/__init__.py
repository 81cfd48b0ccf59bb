"""The client operations :class:`parkway.Engine` offers, by what they act on."""
