package telemetry

import "github.com/kvrouter/kvrouter/actors/pipeline"

// The ingest pipeline is a Pipeline as it is.
var _ Pipeline = (*pipeline.Pipeline)(nil)
