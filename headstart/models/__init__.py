"""Models: the catalogue of presets (catalog), where prepared models are (store), and the one step that
downloads (prepare)."""
