"""Integrations of parkway with other libraries, each behind an optional extra.

- :mod:`parkway.integrations.pydantic_ai`: durable pydantic-ai agents
  (``pip install 'parkway[pydantic-ai]'``).
- :mod:`parkway.integrations.openai_agents`: durable OpenAI Agents SDK runs
  (``pip install 'parkway[openai-agents]'``).

Importing one without its extra raises :class:`parkway.errors.MissingExtraError`
naming the extra to install.
"""
