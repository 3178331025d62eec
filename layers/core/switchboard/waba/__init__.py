"""Business-account onboarding (`/v1/waba`): the WhatsApp Business Platform embedded signup, ending with a connected
`whatsapp_cloud` channel. `service` holds the flow, `graph` the Graph API calls, `support` the error catalogue."""
