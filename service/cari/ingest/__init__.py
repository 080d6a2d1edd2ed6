"""Documents in: parsing, chunking, storing, embedding."""
