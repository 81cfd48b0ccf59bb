"""The client calls :class:`parkway.Engine` offers, by what they act on: plain
functions given the engine's :class:`parkway.client.base.State`, listed on the
engine as methods by :func:`parkway.client.base.delegate`."""
