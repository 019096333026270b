package requestpath

import "github.com/kvrouter/kvrouter/actors/service"

// The router's service is a Backend.
var _ Backend = (*service.Service)(nil)
