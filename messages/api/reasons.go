package api

// Reason labels of error answers, shared by every front end (the HTTP API
// answers {"error": "...", "reason": "..."}; the statuses below are its). The
// set is closed apart from the reasons a Backend chooses through Errorf.
const (
	ReasonBadJSON          = "bad_json"               // 400: not JSON, not an object, trailing data, empty body
	ReasonWrongType        = "wrong_type"             // 400: a field has the wrong JSON type
	ReasonNegativeNumber   = "negative_number"        // 400: a negative number where an unsigned one is expected
	ReasonNotAnInteger     = "not_an_integer"         // 400: a fraction or exponent where an integer is expected
	ReasonOutOfRange       = "out_of_range"           // 400: an integer too large for its field
	ReasonUnknownField     = "unknown_field"          // 400: kvrouter's own endpoints only
	ReasonMissingField     = "missing_field"          // 400: a required field is absent, null or ""
	ReasonInvalidValue     = "invalid_value"          // 400: well-typed but not acceptable
	ReasonTooLong          = "too_long"               // 400: a string over the front end's cap (httpapi: 4096 bytes)
	ReasonBodyTooLarge     = "body_too_large"         // 413
	ReasonTooManyTokens    = "too_many_tokens"        // 413
	ReasonTooManyHashes    = "too_many_block_hashes"  // 413
	ReasonUnsupportedMedia = "unsupported_media_type" // 415
	ReasonMissingToken     = "missing_token"          // 401
	ReasonInvalidToken     = "invalid_token"          // 401
	ReasonMethodNotAllowed = "method_not_allowed"     // 405
	ReasonNotFound         = "not_found"              // 404: no such endpoint, or a Backend ErrNotFound
	ReasonUnknownWorker    = "unknown_worker"         // 404 from /unregister
	ReasonUnknownRequest   = "unknown_request"        // 404 from /route/{id}/…
	ReasonUnknownNamespace = "unknown_namespace"      // 404 from /query, /query_by_hash, /route
	ReasonUnknownSession   = "unknown_session"        // 404 from /sessions/{session_id}
	ReasonUnknownPeer      = "unknown_peer"           // 404 from /deregister_peer
	ReasonConflict         = "conflict"               // 409
	ReasonUnavailable      = "unavailable"            // 503
	ReasonNotReady         = "not_ready"              // 503 from /readyz
	ReasonTimeout          = "timeout"                // 503: the Backend's deadline passed
	ReasonOverloaded       = "overloaded"             // 503: more requests in flight than the router admits
	ReasonCanceled         = "canceled"               // 499: the client went away
	ReasonInternal         = "internal"               // 500: never for client input
	ReasonNotImplemented   = "not_implemented"        // 501: the Backend does not serve this API
	ReasonUnsupported      = "unsupported_field"      // 400: a reference field kvrouter cannot honour
)
