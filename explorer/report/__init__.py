"""What leaves the server as a file: the offline HTML report, its snapshot rules, the Perfetto export."""
