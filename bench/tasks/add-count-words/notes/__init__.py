"""A note-taking app."""
