package engine

import "github.com/kvrouter/kvrouter/messages/wire"

// Family is an Adapter assembled from data: most engines differ only in
// these values. An engine that needs different behaviour implements Adapter
// itself.
type Family struct {
	// Key is the registry name.
	Key string
	// Fold folds bin block hashes; nil means wire.FoldLast8.
	Fold wire.FoldBin
	// Traits are the publisher's sequence habits.
	Traits StreamTraits
	// Topic parses the topic convention; nil means ParseKVTopic.
	Topic func([]byte) (Topic, bool)
	// Shows and Never are its evidence (Adapter.Evidence).
	Shows, Never Evidence
}

// Name implements Adapter.
func (f Family) Name() string { return f.Key }

// NewDecoder implements Adapter.
func (f Family) NewDecoder(lim wire.Limits) *wire.Decoder { return wire.NewDecoder(lim, f.Fold) }

// ParseReplay implements Adapter with ParseReplayFrames (both layouts).
func (f Family) ParseReplay(frames [][]byte) (ReplayReply, error) { return ParseReplayFrames(frames) }

// ParseTopic implements Adapter.
func (f Family) ParseTopic(topic []byte) (Topic, bool) {
	if f.Topic != nil {
		return f.Topic(topic)
	}
	return ParseKVTopic(topic)
}

// Stream implements Adapter.
func (f Family) Stream() StreamTraits { return f.Traits }

// Evidence implements Adapter.
func (f Family) Evidence() (shows, never Evidence) { return f.Shows, f.Never }
