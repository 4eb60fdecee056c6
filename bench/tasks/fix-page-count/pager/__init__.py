"""Paging through long lists."""
