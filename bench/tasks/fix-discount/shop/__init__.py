"""A small shop: prices, discounts and tax."""
