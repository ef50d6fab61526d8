"""Domain services: the business rules on top of the repositories."""
