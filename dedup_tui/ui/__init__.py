"""The review app (Textual). Imported only when the app is launched."""
