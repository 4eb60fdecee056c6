"""Shipping quotes and parcel labels."""
