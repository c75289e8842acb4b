"""Deployment: SavedModels that take raw text (tokenization in-graph) for TF Serving,
saved_model_cli and tf.saved_model.load."""
