"""Domains: named question sets (and counterfactual template sets) that the gates ask models."""

from __future__ import annotations

from pytest_llmbias.domains.domain import Category, Counterfactual, Domain, Question, Template
from pytest_llmbias.domains.loader import BUILTIN_DIR, list_domains, load_domain, parse_domain

__all__ = [
    "BUILTIN_DIR",
    "Category",
    "Counterfactual",
    "Domain",
    "Question",
    "Template",
    "list_domains",
    "load_domain",
    "parse_domain",
]
