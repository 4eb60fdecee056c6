"""findtext: print the lines of a file that contain a text."""
