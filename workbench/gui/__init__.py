"""The desktop workbench: the only package that imports Qt.

``app.main()`` opens the window; torch is imported only after the first paint.
"""
