"""Answers: sources numbered [1]..[n], an LLM (or extractive) answer citing them."""
