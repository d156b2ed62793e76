// Package jetstream carries the signal hub on NATS JetStream, so that several zidane-server
// replicas on one Postgres share session signals, their $seq numbering and the replay log
// (issue 25 item 1; docs/scaling.md). It knows nothing of connections: the server's hub hands it
// encoded signals to publish, and it hands back, on one goroutine and in stream order, every
// signal any replica published, which the hub logs and fans out to its own connections.
//
// Layout on the NATS server:
//
//   - the stream (Config.Stream, default "zidane-signals") holds the sequenced session signals,
//     one subject per session: SessionSubject(id) = "zidane.sig.<session id>";
//   - a key-value bucket (<stream>-seq) keeps each session's last $seq, the floor a replica
//     numbers from when every signal of the session was evicted from the stream;
//   - core NATS subjects (not stored) carry the unsequenced signals: LiveSubject.
//
// Each signal's $seq rides in the HeaderSeq header; a replica publishes $seq n+1 with
// Nats-Expected-Last-Subject-Sequence set to the stream sequence of $seq n, so that two replicas
// publishing to one session never both take n+1: the loser retries with n+2.
package jetstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Subjects and headers on the NATS server.
const (
	// SessionPrefix + session id is a session's subject in the stream.
	SessionPrefix = "zidane.sig."
	// LivePrefix + "all" carries the unsequenced signals to every replica (core NATS, not stored).
	LivePrefix = "zidane.live."
	// HeaderSeq is the signal's $seq (decimal).
	HeaderSeq = "Zidane-Seq"
	// HeaderKind is the signal's kind.
	HeaderKind = "Zidane-Kind"
	// HeaderFrom names the connection the signal came from, "<replica>/<connection>", or is absent.
	HeaderFrom = "Zidane-From"
	// HeaderWatch is the watch key of a watchers signal.
	HeaderWatch = "Zidane-Watch"
	// HeaderReplica names the replica that published the signal (Config.Replica).
	HeaderReplica = "Zidane-Replica"
)

// DefaultStream is the stream's name when Config.Stream is empty.
const DefaultStream = "zidane-signals"

// ErrUnavailable is Publish's error while the replica has no connection to NATS: the signal is
// not sent (the caller's run continues; its transcript is still written).
var ErrUnavailable = errors.New("NATS is unreachable")

// Limits are the replay log's limits applied to the stream (server.ReplayLimits): at most
// PerSessionSignals per subject (MaxMsgsPerSubject) and TotalBytes in the stream (MaxBytes,
// oldest messages discarded first). PerSessionBytes is not a JetStream limit: the publishing
// replica purges a session's oldest messages past it (PurgeBefore).
type Limits struct {
	PerSessionSignals int
	PerSessionBytes   int
	TotalBytes        int
}

// Message is one signal as it came off NATS.
type Message struct {
	Session   string // the session id ("" for an unsequenced signal without one)
	Seq       int64  // $seq, 0 for unsequenced signals
	Kind      string
	From      string // HeaderFrom, or ""
	WatchKey  string
	Body      []byte // the signal's JSON without $seq
	StreamSeq uint64 // the stream's sequence (0 for unsequenced signals)
	Mine      bool   // this replica published it
}

// Config opens a Bus.
type Config struct {
	// URL is the NATS server (nats://host:port, or a comma-separated list of a cluster's).
	URL string
	// Stream names the stream; default DefaultStream. The key-value bucket is Stream+"-seq".
	Stream string
	// Replica names this replica in HeaderReplica (unique among the replicas, e.g. a UUID).
	Replica string
	Limits  Limits
	Logger  *slog.Logger
	// Apply receives every sequenced signal of the stream, those this replica published too, in
	// stream order, on one goroutine; first those the stream holds when the bus opens. Required.
	Apply func(Message)
	// Live receives every unsequenced signal published on LivePrefix, in each publisher's order.
	Live func(Message)
	// Reset is called (before any Apply of the new stream) when the stream was recreated, with the
	// new epoch: every $seq known so far belongs to the old one.
	Reset func(epoch string)
}

type head struct {
	seq       int64
	streamSeq uint64
}

// Bus is one replica's connection to the shared signal stream. Its methods are safe for
// concurrent use.
type Bus struct {
	cfg Config
	log *slog.Logger
	nc  *nats.Conn
	js  natsjs.JetStream

	mu      sync.Mutex
	applied uint64 // the last stream sequence handed to Apply
	advance chan struct{}
	epoch   string
	created time.Time
	st      natsjs.Stream
	kv      natsjs.KeyValue
	cons    natsjs.ConsumeContext
	heads   map[string]head // session → its last known $seq and stream sequence
	floors  map[string]int64
	floorCh chan struct{}
	closed  chan struct{}
	wg      sync.WaitGroup
}

// SessionSubject is the subject of a session's signals; ids are UUIDs (no dots or wildcards).
func SessionSubject(session string) string { return SessionPrefix + session }

// Open connects to cfg.URL, creates or updates the stream and the bucket, and starts consuming
// the stream from its first message. It returns once NATS answered; errors name what failed.
// The connection reconnects forever: while NATS is away Publish fails with ErrUnavailable, and
// on its return consumption resumes where it stopped (or from the start of a recreated stream).
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	if cfg.Apply == nil {
		return nil, errors.New("jetstream: Config.Apply is required")
	}
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	b := &Bus{cfg: cfg, log: cfg.Logger, advance: make(chan struct{}), heads: map[string]head{},
		floors: map[string]int64{}, floorCh: make(chan struct{}, 1), closed: make(chan struct{})}
	nc, err := nats.Connect(cfg.URL, nats.Name("zidane-server"), nats.MaxReconnects(-1),
		nats.ReconnectWait(200*time.Millisecond), nats.PingInterval(5*time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { b.log.Warn("NATS disconnected; reconnecting", "err", err) }),
		nats.ReconnectHandler(func(*nats.Conn) { b.log.Info("NATS reconnected"); go b.recheck() }))
	if err != nil {
		return nil, fmt.Errorf("--nats-url %s: %w", cfg.URL, err)
	}
	b.nc = nc
	if b.js, err = natsjs.New(nc); err != nil {
		nc.Close()
		return nil, err
	}
	if err := b.ensure(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	if cfg.Live != nil {
		if _, err := nc.Subscribe(LivePrefix+"all", b.onLive); err != nil {
			nc.Close()
			return nil, err
		}
	}
	b.wg.Add(1)
	go b.writeFloors()
	return b, nil
}

// streamConfig is the stream of Config.Limits.
func (b *Bus) streamConfig() natsjs.StreamConfig {
	l := b.cfg.Limits
	return natsjs.StreamConfig{
		Name: b.cfg.Stream, Subjects: []string{SessionPrefix + ">"}, Storage: natsjs.FileStorage,
		MaxMsgsPerSubject: int64(l.PerSessionSignals), MaxBytes: int64(l.TotalBytes), Discard: natsjs.DiscardOld,
		AllowDirect: true, Description: "zidane-server session signals (docs/scaling.md)",
	}
}

// ensure creates or updates the stream and the bucket and (re)starts the consumer; a stream
// created anew (or recreated: another creation time) is a new epoch.
func (b *Bus) ensure(ctx context.Context) error {
	st, err := b.js.CreateOrUpdateStream(ctx, b.streamConfig())
	if err != nil {
		return fmt.Errorf("create the JetStream stream %s (is JetStream enabled on the NATS server, nats-server -js?): %w", b.cfg.Stream, err)
	}
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, natsjs.KeyValueConfig{Bucket: b.cfg.Stream + "-seq", History: 1, Storage: natsjs.FileStorage,
		Description: "zidane-server: each session's last $seq (docs/scaling.md)"})
	if err != nil {
		return fmt.Errorf("create the key-value bucket %s-seq: %w", b.cfg.Stream, err)
	}
	created := st.CachedInfo().Created
	b.mu.Lock()
	same := !b.created.IsZero() && b.created.Equal(created)
	b.st, b.kv = st, kv
	if same {
		b.mu.Unlock()
		return nil
	}
	old := b.cons
	b.created = created
	b.epoch = EpochOf(b.cfg.Stream, created)
	b.applied = 0
	b.heads = map[string]head{}
	epoch, reset := b.epoch, b.cons != nil
	b.mu.Unlock()
	if old != nil {
		old.Stop()
	}
	if reset && b.cfg.Reset != nil {
		b.log.Warn("the signal stream was recreated: a new signal epoch (clients reload)", "epoch", epoch)
		b.cfg.Reset(epoch)
	}
	cons, err := st.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{FilterSubjects: []string{SessionPrefix + ">"}, DeliverPolicy: natsjs.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("consume the stream %s: %w", b.cfg.Stream, err)
	}
	cc, err := cons.Consume(b.onStream, natsjs.PullHeartbeat(2*time.Second), natsjs.PullExpiry(10*time.Second))
	if err != nil {
		return fmt.Errorf("consume the stream %s: %w", b.cfg.Stream, err)
	}
	b.mu.Lock()
	b.cons = cc
	b.mu.Unlock()
	return nil
}

// recheck runs after a reconnect: a stream lost with the NATS server's store is created again,
// as a new epoch.
func (b *Bus) recheck() {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := b.ensure(ctx)
		cancel()
		if err == nil {
			return
		}
		b.log.Warn("NATS reconnected but the signal stream is not ready; retrying", "err", err)
		select {
		case <-b.closed:
			return
		case <-time.After(time.Second):
		}
	}
}

// EpochOf is the signal epoch of a stream: a UUID (version 5) of its name and creation time, so
// every replica names it alike and it changes only when the stream is created again.
func EpochOf(stream string, created time.Time) string {
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("nats-jetstream:"+stream+":"+created.UTC().Format(time.RFC3339Nano))).String()
}

// Epoch is the current stream's signal epoch.
func (b *Bus) Epoch() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch
}

// Connected reports whether the replica is connected to NATS now (for /healthz).
func (b *Bus) Connected() bool { return b.nc.IsConnected() }

// Conn is the NATS connection, for other cross-replica traffic (requests to a run's owner).
func (b *Bus) Conn() *nats.Conn { return b.nc }

func (b *Bus) onStream(m natsjs.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	h := m.Headers()
	seq, err := strconv.ParseInt(h.Get(HeaderSeq), 10, 64)
	session := strings.TrimPrefix(m.Subject(), SessionPrefix)
	if err != nil || seq <= 0 {
		b.log.Error("a signal on the stream without a valid $seq header: skipped", "subject", m.Subject(), "stream_seq", md.Sequence.Stream)
	} else {
		b.mu.Lock()
		if hd := b.heads[session]; md.Sequence.Stream > hd.streamSeq {
			b.heads[session] = head{seq: seq, streamSeq: md.Sequence.Stream}
		}
		b.mu.Unlock()
		b.cfg.Apply(Message{Session: session, Seq: seq, Kind: h.Get(HeaderKind), From: h.Get(HeaderFrom), Body: m.Data(), StreamSeq: md.Sequence.Stream,
			Mine: h.Get(HeaderReplica) == b.cfg.Replica})
	}
	b.mu.Lock()
	if md.Sequence.Stream > b.applied {
		b.applied = md.Sequence.Stream
		close(b.advance)
		b.advance = make(chan struct{})
	}
	b.mu.Unlock()
}

func (b *Bus) onLive(m *nats.Msg) {
	b.cfg.Live(Message{Kind: m.Header.Get(HeaderKind), From: m.Header.Get(HeaderFrom), WatchKey: m.Header.Get(HeaderWatch), Body: m.Data})
}

// WaitApplied returns once the stream's messages up to streamSeq were handed to Apply, or ctx's
// error.
func (b *Bus) WaitApplied(ctx context.Context, streamSeq uint64) error {
	for {
		b.mu.Lock()
		done, ch := b.applied >= streamSeq, b.advance
		b.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the signal stream to reach sequence %d: %w", streamSeq, context.Cause(ctx))
		}
	}
}

// Barrier returns once every signal of the session the stream held when it was called was
// handed to Apply: what this replica then knows of the session is what every replica published
// before. One direct get from the stream, then a wait on the consumer.
func (b *Bus) Barrier(ctx context.Context, session string) error {
	if !b.nc.IsConnected() {
		return ErrUnavailable
	}
	b.mu.Lock()
	st := b.st
	b.mu.Unlock()
	m, err := st.GetLastMsgForSubject(ctx, SessionSubject(session))
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return b.WaitApplied(ctx, m.Sequence)
}

// Publish appends a sequenced signal to the session's subject with the session's next $seq and
// returns that $seq and the stream sequence; from is HeaderFrom's value or "". A conflict with
// another replica's publish (the expected last subject sequence moved) is retried with the
// next $seq. Errors: ErrUnavailable while NATS is away; NATS's error otherwise (nothing stored).
func (b *Bus) Publish(ctx context.Context, session, kind string, body []byte, from string) (int64, uint64, error) {
	if !validToken(session) {
		return 0, 0, fmt.Errorf("session id %q cannot be a NATS subject token", session)
	}
	if !b.nc.IsConnected() {
		return 0, 0, ErrUnavailable
	}
	subj := SessionSubject(session)
	for attempt := 0; ; attempt++ {
		b.mu.Lock()
		hd, known := b.heads[session]
		b.mu.Unlock()
		if !known || attempt > 0 {
			var err error
			if hd, err = b.loadHead(ctx, session); err != nil {
				return 0, 0, err
			}
		}
		msg := &nats.Msg{Subject: subj, Data: body, Header: nats.Header{}}
		msg.Header.Set(HeaderSeq, strconv.FormatInt(hd.seq+1, 10))
		msg.Header.Set(HeaderKind, kind)
		msg.Header.Set(HeaderReplica, b.cfg.Replica)
		if from != "" {
			msg.Header.Set(HeaderFrom, from)
		}
		ack, err := b.js.PublishMsg(ctx, msg, natsjs.WithExpectLastSequencePerSubject(hd.streamSeq))
		if err != nil {
			var apiErr *natsjs.APIError
			if errors.As(err, &apiErr) && (apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequenceConstant) && attempt < 50 {
				continue // another replica took hd.seq+1: number again
			}
			if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrNoResponders) || !b.nc.IsConnected() {
				return 0, 0, fmt.Errorf("%w: %v", ErrUnavailable, err)
			}
			return 0, 0, err
		}
		seq := hd.seq + 1
		b.mu.Lock()
		if cur := b.heads[session]; ack.Sequence > cur.streamSeq {
			b.heads[session] = head{seq: seq, streamSeq: ack.Sequence}
		}
		if seq > b.floors[session] {
			b.floors[session] = seq
		}
		b.mu.Unlock()
		select {
		case b.floorCh <- struct{}{}:
		default:
		}
		return seq, ack.Sequence, nil
	}
}

// ErrGap is Since's error when the stream no longer holds the session's signal after afterSeq
// (evicted by the limits): what followed it is not all there.
var ErrGap = errors.New("the signal stream no longer holds every signal of the session after that $seq")

// Since returns the session's signals in the stream with a $seq after afterSeq, in order (what a
// dead replica streamed after its transcript's last write, issue 25 §2): it reads the session's
// subject with an ordered consumer up to the last message the stream holds for it when called.
// Errors: ErrUnavailable while NATS is away, ErrGap when the first one held is past afterSeq+1,
// NATS's or ctx's otherwise.
func (b *Bus) Since(ctx context.Context, session string, afterSeq int64) ([]Message, error) {
	if !validToken(session) {
		return nil, fmt.Errorf("session id %q cannot be a NATS subject token", session)
	}
	if !b.nc.IsConnected() {
		return nil, ErrUnavailable
	}
	b.mu.Lock()
	st := b.st
	b.mu.Unlock()
	last, err := st.GetLastMsgForSubject(ctx, SessionSubject(session))
	if errors.Is(err, natsjs.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if seq, _ := strconv.ParseInt(last.Header.Get(HeaderSeq), 10, 64); seq <= afterSeq {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{FilterSubjects: []string{SessionSubject(session)}, DeliverPolicy: natsjs.DeliverAllPolicy})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	defer it.Stop()
	var out []Message
	for {
		m, err := it.Next(natsjs.NextContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("reading session %s's signals from the stream: %w", session, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, err
		}
		h := m.Headers()
		if seq, err := strconv.ParseInt(h.Get(HeaderSeq), 10, 64); err == nil && seq > afterSeq {
			if len(out) == 0 && seq > afterSeq+1 {
				return nil, fmt.Errorf("%w: it holds $seq %d onwards, not %d", ErrGap, seq, afterSeq+1)
			}
			out = append(out, Message{Session: session, Seq: seq, Kind: h.Get(HeaderKind), From: h.Get(HeaderFrom), Body: m.Data(),
				StreamSeq: md.Sequence.Stream, Mine: h.Get(HeaderReplica) == b.cfg.Replica})
		}
		if md.Sequence.Stream >= last.Sequence {
			return out, nil
		}
	}
}

// loadHead reads the session's last $seq from the stream, or from the bucket's floor when the
// stream holds none of its signals (all evicted); 0 for a session never signalled.
func (b *Bus) loadHead(ctx context.Context, session string) (head, error) {
	b.mu.Lock()
	st, kv := b.st, b.kv
	b.mu.Unlock()
	m, err := st.GetLastMsgForSubject(ctx, SessionSubject(session))
	if err == nil {
		seq, perr := strconv.ParseInt(m.Header.Get(HeaderSeq), 10, 64)
		if perr != nil {
			return head{}, fmt.Errorf("the last signal of session %s has no valid %s header", session, HeaderSeq)
		}
		return head{seq: seq, streamSeq: m.Sequence}, nil
	}
	if !errors.Is(err, natsjs.ErrMsgNotFound) {
		return head{}, err
	}
	e, err := kv.Get(ctx, session)
	if errors.Is(err, natsjs.ErrKeyNotFound) {
		return head{}, nil
	}
	if err != nil {
		return head{}, err
	}
	f, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil {
		return head{}, fmt.Errorf("the $seq floor of session %s is not a number", session)
	}
	return head{seq: f}, nil
}

// writeFloors writes the sessions' last $seq to the bucket off the publish path, coalesced: a
// compare-and-set that never lowers the stored value (another replica may have written a later one).
func (b *Bus) writeFloors() {
	defer b.wg.Done()
	for {
		select {
		case <-b.closed:
			return
		case <-b.floorCh:
		}
		b.mu.Lock()
		todo := b.floors
		b.floors = map[string]int64{}
		kv := b.kv
		b.mu.Unlock()
		for session, seq := range todo {
			if err := raiseFloor(kv, session, seq); err != nil {
				b.log.Warn("the $seq floor of a session was not written; retried with its next signal", "session", session, "err", err)
			}
		}
	}
}

func raiseFloor(kv natsjs.KeyValue, session string, seq int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	val := []byte(strconv.FormatInt(seq, 10))
	for i := 0; i < 20; i++ {
		e, err := kv.Get(ctx, session)
		if errors.Is(err, natsjs.ErrKeyNotFound) {
			if _, err = kv.Create(ctx, session, val); err == nil || !errors.Is(err, natsjs.ErrKeyExists) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if cur, _ := strconv.ParseInt(string(e.Value()), 10, 64); cur >= seq {
			return nil
		}
		if _, err = kv.Update(ctx, session, val, e.Revision()); err == nil || !errors.Is(err, natsjs.ErrKeyRevisionMismatch) {
			return err
		}
	}
	return errors.New("too many concurrent writers")
}

// PurgeBefore removes the session's messages before streamSeq from the stream: the per-session
// byte limit, which JetStream does not have, applied by the replica that published.
func (b *Bus) PurgeBefore(ctx context.Context, session string, streamSeq uint64) error {
	b.mu.Lock()
	st := b.st
	b.mu.Unlock()
	return st.Purge(ctx, natsjs.WithPurgeSubject(SessionSubject(session)), natsjs.WithPurgeSequence(streamSeq))
}

// PublishLive sends an unsequenced signal to every replica (core NATS, not stored: a replica
// away at that moment misses it, as a disconnected client does). from and watchKey as in Message.
func (b *Bus) PublishLive(kind string, body []byte, from, watchKey string) error {
	if !b.nc.IsConnected() {
		return ErrUnavailable
	}
	msg := &nats.Msg{Subject: LivePrefix + "all", Data: body, Header: nats.Header{}}
	msg.Header.Set(HeaderKind, kind)
	if from != "" {
		msg.Header.Set(HeaderFrom, from)
	}
	if watchKey != "" {
		msg.Header.Set(HeaderWatch, watchKey)
	}
	return b.nc.PublishMsg(msg)
}

// Close stops consuming and closes the connection (pending floors are flushed first).
func (b *Bus) Close() {
	close(b.closed)
	b.wg.Wait()
	b.mu.Lock()
	cons := b.cons
	todo, kv := b.floors, b.kv
	b.mu.Unlock()
	for session, seq := range todo {
		_ = raiseFloor(kv, session, seq)
	}
	if cons != nil {
		cons.Stop()
	}
	_ = b.nc.Drain()
}

// validToken: a subject token has no dots, wildcards or white space.
func validToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}
