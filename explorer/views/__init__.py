"""Page data, computed once for a page and its JSON twin: one module per page family (../shared/LAYOUT.md).

The older families still live at explorer/ (pages.py, device_pages.py, rank_pages.py, fleet.py) until they move here.
"""
