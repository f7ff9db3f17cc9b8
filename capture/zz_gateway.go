package capture

// IsPayloadObject reports whether b can be stored as an exchange's request or response object:
// EncodeExchange accepts it and the line it ends up in reads back. The gateway asks before it
// chooses between request and request_raw (or a response object and null), so a payload the store
// would refuse degrades to raw text instead of costing the whole line. (Added by the gateway
// helper; it only exposes the store's own rule.)
func IsPayloadObject(b []byte) bool { return isJSONObject(b) }
