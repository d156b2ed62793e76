package server

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/zidane-server/zidane/server/hub/jetstream"
)

// openBus connects the hub to NATS JetStream (Config.NATSURL; issue 25 item 1): from then on the
// signal epoch is the stream's, sequenced signals are numbered by the stream and this replica's
// replay log is rebuilt from it. It fails when NATS does not answer within 15 s.
func (s *Server) openBus(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	s.hub.replica = uuid.NewString()
	bus, err := jetstream.Open(ctx, jetstream.Config{
		URL: s.cfg.NATSURL, Stream: s.cfg.NATSStream, Replica: s.hub.replica, Logger: s.log,
		Limits: jetstream.Limits{PerSessionSignals: s.cfg.Limits.Replay.PerSessionSignals,
			PerSessionBytes: s.cfg.Limits.Replay.PerSessionBytes, TotalBytes: s.cfg.Limits.Replay.TotalBytes},
		Apply: s.hub.apply, Live: s.hub.live, Reset: s.hub.reset,
	})
	if err != nil {
		return err
	}
	s.hub.mu.Lock()
	s.hub.epoch = bus.Epoch()
	s.hub.mu.Unlock()
	s.hub.bus.Store(bus)
	s.log.Info("signals on NATS JetStream", "replica", s.hub.replica, "signal_epoch", bus.Epoch())
	return nil
}

// Bus is the NATS JetStream bus of --nats-url, or nil (the in-process hub): /healthz reports its
// connection and the cross-replica requests of run leases travel on its connection (issue 25
// items 2 and 4).
func (s *Server) Bus() *jetstream.Bus { return s.hub.bus.Load() }

// Replica names this replica among those sharing the bus ("" without one): the prefix of its
// connections' references, unique across replicas.
func (s *Server) Replica() string { return s.hub.replica }
