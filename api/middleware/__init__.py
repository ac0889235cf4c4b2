"""The app's middleware: the Host/Origin guard, access tokens, gzip."""
