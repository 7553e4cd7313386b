"""The workbench's .npz dataset files: check one cheaply (headers only), or make one from images.

Nothing here imports torch or Qt: the CLI, the settings form and the engine all use it.
"""
