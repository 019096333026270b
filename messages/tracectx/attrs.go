package tracectx

import "go.opentelemetry.io/otel/attribute"

// Attribute keys shared by the pipeline's spans. They identify streams and
// batches; session and request ids are never attributes of pipeline spans.
const (
	Worker = attribute.Key("kvrouter.worker_id")
	DpRank = attribute.Key("kvrouter.dp_rank")
	Seq    = attribute.Key("kvrouter.seq")
	Topic  = attribute.Key("kvrouter.topic")
	Events = attribute.Key("kvrouter.events") // events in the message
	Bytes  = attribute.Key("kvrouter.bytes")  // payload size
	Reason = attribute.Key("kvrouter.reason") // why a stream resynced or was cleared
	Exact  = attribute.Key("kvrouter.exact")  // the stream is complete after a resync
)
