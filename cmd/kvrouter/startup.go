package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/kvrouter/kvrouter/cmd/kvrouter/httpapi"
	"github.com/kvrouter/kvrouter/cmd/kvrouter/service"
)

// startup is how kvrouter serve registers its first workers: from a peer's
// dump, a worker file, then --worker flags, in that order (a bootstrap
// needs an empty router).
type startup struct {
	bootstrapFrom string // peer URL ("" none)
	token         string // sent to the peer too
	workersFile   string
	workers       workerFlags
	model, tenant string // of --worker workers
}

// bootstrapTimeout bounds reading a peer's dump.
const bootstrapTimeout = 2 * time.Minute

func (st startup) run(svc *service.Service, log *slog.Logger) error {
	if st.bootstrapFrom != "" {
		ctx, cancel := context.WithTimeout(context.Background(), bootstrapTimeout)
		rep, err := svc.Bootstrap(ctx, st.bootstrapFrom, st.token)
		cancel()
		if err != nil {
			return fmt.Errorf("--bootstrap-from: %w", err)
		}
		log.Info("bootstrapped from a peer", "peer", st.bootstrapFrom, "namespaces", rep.Namespaces,
			"events", rep.Events, "streams_resumed", rep.Resumed, "streams_fresh", rep.Fresh)
	}
	var regs []httpapi.Registration
	if st.workersFile != "" {
		f, err := os.Open(st.workersFile)
		if err != nil {
			return fmt.Errorf("--workers-file: %w", err)
		}
		regs, err = httpapi.ReadWorkerFile(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("--workers-file %s: %w", st.workersFile, err)
		}
	}
	for _, w := range st.workers {
		if w.Engine != "" || w.Bind || w.TopicIdentity || w.Topic != "" {
			return fmt.Errorf("--worker %d: serve takes ID[:RANK]=ENDPOINT[,replay=ENDPOINT][,serving=HOST:PORT] only (engine=, topic=, bind and by-topic are kvrouter tap options; --engine sets the adapter)", w.Stream.Worker)
		}
		regs = append(regs, httpapi.Registration{InstanceID: w.Stream.Worker, DpRank: w.Stream.DpRank,
			Endpoint: w.Endpoint, ReplayEndpoint: w.ReplayEndpoint, ServingEndpoint: w.ServingEndpoint, ModelName: st.model, TenantID: st.tenant})
	}
	for _, reg := range regs {
		if err := svc.Register(context.Background(), reg); err != nil {
			return fmt.Errorf("worker %d rank %d: %w", reg.InstanceID, reg.DpRank, err)
		}
	}
	return nil
}
