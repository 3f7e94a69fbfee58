"""The drift tier's upstream: a REST API that answers in each way real servers drift from their specs."""
