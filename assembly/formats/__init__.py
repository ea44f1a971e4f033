"""Readers and writers of the conversation formats people keep besides promptls' own.

``detect`` tells which format a parsed document is by its shape; ``anthropic`` and
``responses`` read Anthropic Messages and OpenAI Responses documents into the same
``Conversation`` model the promptls reader builds (``documents.py``), with exact source
ranges; ``anthropic_out`` renders an assembled context back as an Anthropic request.
"""
