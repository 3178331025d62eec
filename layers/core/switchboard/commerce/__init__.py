"""Commerce: orders made from WhatsApp's order messages and moved by order status messages and payment webhooks."""
