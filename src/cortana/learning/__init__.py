"""Learning: experience recipes, ratings, teach mode and skills."""
