package worq

import (
	"encoding/json"
	"fmt"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// JobPriority orders jobs inside one queue: strictly by level, FIFO within a level.
type JobPriority int32

// Priorities, highest first. PriorityDefault lets the server choose (NORMAL).
const (
	PriorityDefault  JobPriority = JobPriority(worqv1.Priority_PRIORITY_UNSPECIFIED)
	PriorityCritical JobPriority = JobPriority(worqv1.Priority_PRIORITY_CRITICAL)
	PriorityHigh     JobPriority = JobPriority(worqv1.Priority_PRIORITY_HIGH)
	PriorityNormal   JobPriority = JobPriority(worqv1.Priority_PRIORITY_NORMAL)
	PriorityLow      JobPriority = JobPriority(worqv1.Priority_PRIORITY_LOW)
	PriorityBulk     JobPriority = JobPriority(worqv1.Priority_PRIORITY_BULK)
)

func (p JobPriority) String() string { return trimEnum(worqv1.Priority(p).String(), "PRIORITY_") }

// BackoffStrategy computes the delay before each retry.
type BackoffStrategy int32

// Backoff strategies. BackoffDefault lets the server choose (EXPONENTIAL).
const (
	BackoffDefault     BackoffStrategy = BackoffStrategy(worqv1.BackoffStrategy_BACKOFF_STRATEGY_UNSPECIFIED)
	BackoffConstant    BackoffStrategy = BackoffStrategy(worqv1.BackoffStrategy_BACKOFF_STRATEGY_CONSTANT)
	BackoffLinear      BackoffStrategy = BackoffStrategy(worqv1.BackoffStrategy_BACKOFF_STRATEGY_LINEAR)
	BackoffExponential BackoffStrategy = BackoffStrategy(worqv1.BackoffStrategy_BACKOFF_STRATEGY_EXPONENTIAL)
)

// ExhaustedAction says what happens to a job whose retries are used up.
type ExhaustedAction int32

// Exhausted actions. ExhaustedDefault lets the server choose (DEAD_LETTER).
const (
	ExhaustedDefault    ExhaustedAction = ExhaustedAction(worqv1.ExhaustedAction_EXHAUSTED_ACTION_UNSPECIFIED)
	ExhaustedDeadLetter ExhaustedAction = ExhaustedAction(worqv1.ExhaustedAction_EXHAUSTED_ACTION_DEAD_LETTER)
	ExhaustedDiscard    ExhaustedAction = ExhaustedAction(worqv1.ExhaustedAction_EXHAUSTED_ACTION_DISCARD)
)

// RetryPolicy bounds and paces the attempts of one job. A zero field takes the server's
// default (proto/worq/v1/job.proto, RetryPolicy).
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included: 1 means never retry
	// (Faktory `retry: 0`). 0: server default (3). UnlimitedAttempts: no limit (the job
	// runs until it completes or its ttl ends it).
	MaxAttempts int
	// MaxFails limits explicit Fail reports apart from attempts. 0: no separate limit.
	MaxFails int
	// Backoff is the delay algorithm. Default EXPONENTIAL.
	Backoff BackoffStrategy
	// InitialDelay is the delay before the first retry. 0: server default (1 s).
	InitialDelay time.Duration
	// Multiplier is EXPONENTIAL's growth factor (≥ 1). 0: server default (2).
	Multiplier float64
	// MaxDelay caps any single delay. 0: server default (1 h).
	MaxDelay time.Duration
	// Jitter spreads each delay by ±10 %.
	Jitter bool
	// OnExhausted: keep the job in DEAD_LETTER (default) or discard it.
	OnExhausted ExhaustedAction
	// RetryTimeout says whether a TIMEOUT failure (past the execution timeout) is retried;
	// nil takes the queue's setting, else true. false: FAILED at once.
	RetryTimeout *bool
	// RetrySystem says whether a SYSTEM failure (a lapsed lease) is retried; nil takes the
	// queue's setting, else true. false: FAILED at once.
	RetrySystem *bool
}

// UnlimitedAttempts as RetryPolicy.MaxAttempts: no limit on attempts (sent as max_attempts 0).
const UnlimitedAttempts = -1

// DependencyType says when a dependent job may run.
type DependencyType int32

// Dependency types. DependencyDefault lets the server choose (AFTER).
const (
	DependencyDefault  DependencyType = DependencyType(worqv1.DependencyType_DEPENDENCY_TYPE_UNSPECIFIED)
	DependencyAfter    DependencyType = DependencyType(worqv1.DependencyType_DEPENDENCY_TYPE_AFTER)
	DependencyAfterAny DependencyType = DependencyType(worqv1.DependencyType_DEPENDENCY_TYPE_AFTER_ANY)
)

// Dependencies makes a job wait in PENDING until other jobs finish. With AFTER (the
// default) it runs once all of them COMPLETED, and a dependency ending FAILED, DEAD_LETTER
// or CANCELLED gives it that same state; with AFTER_ANY it runs once all of them finished,
// whatever their state.
type Dependencies struct {
	Type      DependencyType
	JIDs      []string // existing jobs
	BatchRefs []string // jobs of the same SubmitBatch, by their JobSpec.BatchRef
	// ChildrenOf joins a job and every child it spawns (jobs submitted with it as ParentJID),
	// those spawned later included: FAN_IN over spawned jobs.
	ChildrenOf string
}

// JobSpec is everything a producer sets on a job. Zero fields take the server's defaults.
// Build one with NewJobSpec and SubmitOptions, or fill it in directly.
type JobSpec struct {
	Type             string            // required: what workers dispatch on
	Queue            string            // default "default"
	Args             []any             // positional arguments (JSON values; numbers arrive as float64)
	Kwargs           map[string]any    // keyword arguments (JSON object)
	Payload          []byte            // opaque bytes, delivered unmodified
	Custom           map[string]any    // application data passed through
	Priority         JobPriority       // default NORMAL
	At               time.Time         // run no earlier than this (exclusive with Delay)
	Delay            time.Duration     // run no earlier than now + Delay (exclusive with At)
	Retry            *RetryPolicy      // default: 3 attempts, exponential backoff from 1 s
	ReserveFor       time.Duration     // how long one lease lasts without a renewal; default 5 min
	ExecutionTimeout time.Duration     // hard cap on one attempt; default 30 min
	Backtrace        int               // stack frames of a failure to keep; default 0
	Tags             map[string]string // user labels
	CorrelationID    string            // trace correlation id, stored and returned unchanged
	TTL              time.Duration     // lifetime from submission; default 7 days
	IdempotencyKey   string            // a repeat submit of this type and key returns the first job
	DependsOn        *Dependencies     // jobs this one waits for
	BatchRef         string            // this job's name inside a SubmitBatch, for BatchRefs
	ParentJID        string            // the job that spawned this one (fan-out)
	CallbackURL      string            // POSTed the job when it reaches a terminal state
	Group            string            // the job's group within its queue: limits per group, turns between groups
	Unique           *Uniqueness       // at most one job of the queue holding this key (not with IdempotencyKey or Debounce)
	Debounce         *DebounceSpec     // update a waiting job of the queue with this key instead of adding one
	Trace            *TraceContext     // W3C trace context; nil: the span in the submit's context, if any (WithTrace, WithoutTrace)
	BatchID          string            // the batch (CreateBatch) the job joins
}

// UniqueUntil says how long a unique job's key stays held.
type UniqueUntil int32

// How long a unique key stays held.
const (
	// UniqueWindow: for Uniqueness.Window from the first job's submit, whatever the job does (the default).
	UniqueWindow UniqueUntil = UniqueUntil(worqv1.UniqueUntil_UNIQUE_UNTIL_WINDOW)
	// UniqueStarted: until the holder is first leased; another job may then wait while it runs.
	UniqueStarted UniqueUntil = UniqueUntil(worqv1.UniqueUntil_UNIQUE_UNTIL_STARTED)
	// UniqueFinished: until the holder reaches a terminal state (or is deleted).
	UniqueFinished UniqueUntil = UniqueUntil(worqv1.UniqueUntil_UNIQUE_UNTIL_FINISHED)
)

// Uniqueness makes a submit whose key is held (in the job's queue) return the holding job
// (SubmitResult.Duplicate) instead of creating one.
type Uniqueness struct {
	Key    string        // at most 256 chars; empty: derived from type, queue, args, kwargs and payload
	Until  UniqueUntil   // zero: UniqueWindow
	Window time.Duration // for UniqueWindow: 1 s to 30 days (zero: 24 h); must be zero otherwise
}

// DebounceSpec: a submit whose key matches a job of the queue that has not started yet
// replaces its args, kwargs, payload and custom and moves its start to now + Delay
// (SubmitResult.Debounced); otherwise a new job starts then.
type DebounceSpec struct {
	Key   string        // required, at most 256 chars
	Delay time.Duration // required, 1 ms to 30 days
}

// SubmitOption sets one field of a JobSpec.
type SubmitOption func(*JobSpec)

// NewJobSpec builds a JobSpec of the given type, for SubmitBatch.
func NewJobSpec(jobType string, opts ...SubmitOption) JobSpec {
	spec := JobSpec{Type: jobType}
	for _, opt := range opts {
		opt(&spec)
	}
	return spec
}

// Args sets the positional arguments. Values must encode as JSON.
func Args(args ...any) SubmitOption { return func(s *JobSpec) { s.Args = args } }

// Kwargs sets the keyword arguments. Values must encode as JSON.
func Kwargs(kwargs map[string]any) SubmitOption { return func(s *JobSpec) { s.Kwargs = kwargs } }

// Payload sets opaque bytes delivered to the worker unmodified.
func Payload(payload []byte) SubmitOption { return func(s *JobSpec) { s.Payload = payload } }

// Queue sets the queue (default "default").
func Queue(queue string) SubmitOption { return func(s *JobSpec) { s.Queue = queue } }

// Priority sets the priority inside the queue, e.g. Priority(PriorityHigh).
func Priority(p JobPriority) SubmitOption { return func(s *JobSpec) { s.Priority = p } }

// At schedules the job to run no earlier than t.
func At(t time.Time) SubmitOption { return func(s *JobSpec) { s.At = t } }

// Delay schedules the job to run no earlier than d after submission.
func Delay(d time.Duration) SubmitOption { return func(s *JobSpec) { s.Delay = d } }

// Retry sets the retry policy.
func Retry(p RetryPolicy) SubmitOption { return func(s *JobSpec) { s.Retry = &p } }

// Custom sets application data passed through untouched.
func Custom(custom map[string]any) SubmitOption { return func(s *JobSpec) { s.Custom = custom } }

// ReserveFor sets how long one lease lasts without a renewal (1 ms to 24 h).
func ReserveFor(d time.Duration) SubmitOption { return func(s *JobSpec) { s.ReserveFor = d } }

// ExecutionTimeout caps one attempt's wall-clock time, renewals included.
func ExecutionTimeout(d time.Duration) SubmitOption {
	return func(s *JobSpec) { s.ExecutionTimeout = d }
}

// Backtrace sets how many stack frames of a failure the server keeps (0 to 1000).
func Backtrace(frames int) SubmitOption { return func(s *JobSpec) { s.Backtrace = frames } }

// Tags sets user labels.
func Tags(tags map[string]string) SubmitOption { return func(s *JobSpec) { s.Tags = tags } }

// CorrelationID sets a trace correlation id.
func CorrelationID(id string) SubmitOption { return func(s *JobSpec) { s.CorrelationID = id } }

// TTL sets the job's lifetime: unfinished by submission + ttl, it goes to DEAD_LETTER;
// finished (COMPLETED or CANCELLED), it is deleted then.
func TTL(d time.Duration) SubmitOption { return func(s *JobSpec) { s.TTL = d } }

// IdempotencyKey deduplicates submits: within the server's window, a submit of the same
// type and key returns the earlier job's jid and creates nothing.
func IdempotencyKey(key string) SubmitOption { return func(s *JobSpec) { s.IdempotencyKey = key } }

// DependsOn makes the job wait until the given jobs COMPLETED (AFTER).
func DependsOn(jids ...string) SubmitOption {
	return func(s *JobSpec) { s.DependsOn = &Dependencies{JIDs: jids} }
}

// WithDependencies sets the job's dependencies in full (type, jids, batch refs).
func WithDependencies(d Dependencies) SubmitOption { return func(s *JobSpec) { s.DependsOn = &d } }

// BatchRef names the job inside a SubmitBatch, so that others can depend on it.
func BatchRef(ref string) SubmitOption { return func(s *JobSpec) { s.BatchRef = ref } }

// JoinChildrenOf makes the job wait for `parent` and every child it spawns, those spawned
// later included (FAN_IN over spawned jobs; AFTER: a failed child fails the join).
func JoinChildrenOf(parent string) SubmitOption {
	return func(s *JobSpec) { s.DependsOn = &Dependencies{ChildrenOf: parent} }
}

// ParentJID records the job that spawned this one (usually the running job's JID).
func ParentJID(jid string) SubmitOption { return func(s *JobSpec) { s.ParentJID = jid } }

// CallbackURL sets a webhook the server POSTs the job to when it reaches a terminal state
// (its origin must be allowed by the server's --callback-allow).
func CallbackURL(url string) SubmitOption { return func(s *JobSpec) { s.CallbackURL = url } }

// Group puts the job in a group of its queue (e.g. "customer:42"): the queue's group limits
// apply to each group alone, and groups with ready jobs take turns.
func Group(key string) SubmitOption { return func(s *JobSpec) { s.Group = key } }

// InBatch adds the job to a batch (CreateBatch): an open one, or a sealed one when the
// submit comes from a running job of the batch (with ParentJID naming that job).
func InBatch(batchID string) SubmitOption { return func(s *JobSpec) { s.BatchID = batchID } }

// Unique makes the job unique in its queue (see Uniqueness).
func Unique(u Uniqueness) SubmitOption { return func(s *JobSpec) { s.Unique = &u } }

// Debounce debounces the job in its queue under key: it starts delay after the latest submit.
func Debounce(key string, delay time.Duration) SubmitOption {
	return func(s *JobSpec) { s.Debounce = &DebounceSpec{Key: key, Delay: delay} }
}

// toProto converts the spec; field names in errors are prefixed with `field`.
func (s JobSpec) toProto(field string) (*worqv1.JobSpec, error) {
	out := &worqv1.JobSpec{
		Type:           s.Type,
		Queue:          s.Queue,
		Payload:        s.Payload,
		Priority:       worqv1.Priority(s.Priority),
		Tags:           s.Tags,
		CorrelationId:  s.CorrelationID,
		IdempotencyKey: s.IdempotencyKey,
		BatchRef:       s.BatchRef,
		ParentJid:      s.ParentJID,
		CallbackUrl:    s.CallbackURL,
		GroupKey:       s.Group,
		BatchId:        s.BatchID,
	}
	if s.TTL != 0 {
		out.Ttl = durationpb.New(s.TTL)
	}
	if u := s.Unique; u != nil {
		out.Unique = &worqv1.Uniqueness{Key: u.Key, Until: worqv1.UniqueUntil(u.Until)}
		if u.Window != 0 {
			out.Unique.Window = durationpb.New(u.Window)
		}
	}
	if d := s.Debounce; d != nil {
		out.Debounce = &worqv1.Debounce{Key: d.Key}
		if d.Delay != 0 {
			out.Debounce.Delay = durationpb.New(d.Delay)
		}
	}
	if d := s.DependsOn; d != nil {
		out.DependsOn = &worqv1.Dependencies{Type: worqv1.DependencyType(d.Type), Jids: d.JIDs, BatchRefs: d.BatchRefs, ChildrenOf: d.ChildrenOf}
	}
	if s.Args != nil {
		list, err := toList(s.Args)
		if err != nil {
			return nil, invalidArgument("%s.args: %v", field, err)
		}
		out.Args = list
	}
	var err error
	if out.Kwargs, err = toStruct(s.Kwargs); err != nil {
		return nil, invalidArgument("%s.kwargs: %v", field, err)
	}
	if out.Custom, err = toStruct(s.Custom); err != nil {
		return nil, invalidArgument("%s.custom: %v", field, err)
	}
	if !s.At.IsZero() {
		out.At = timestamppb.New(s.At)
	}
	if s.Delay != 0 {
		out.Delay = durationpb.New(s.Delay)
	}
	if s.ReserveFor != 0 {
		out.ReserveFor = durationpb.New(s.ReserveFor)
	}
	if s.ExecutionTimeout != 0 {
		out.ExecutionTimeout = durationpb.New(s.ExecutionTimeout)
	}
	if s.Backtrace < 0 {
		return nil, invalidArgument("%s.backtrace: must not be negative", field)
	}
	out.Backtrace = uint32(s.Backtrace)
	if r := s.Retry; r != nil {
		p := &worqv1.RetryPolicy{
			Backoff:     worqv1.BackoffStrategy(r.Backoff),
			Jitter:      r.Jitter,
			OnExhausted: worqv1.ExhaustedAction(r.OnExhausted),
		}
		if (r.MaxAttempts < 0 && r.MaxAttempts != UnlimitedAttempts) || r.MaxFails < 0 {
			return nil, invalidArgument("%s.retry: max_attempts and max_fails must not be negative (UnlimitedAttempts aside)", field)
		}
		if r.MaxAttempts > 0 {
			p.MaxAttempts = proto.Uint32(uint32(r.MaxAttempts))
		} else if r.MaxAttempts == UnlimitedAttempts {
			p.MaxAttempts = proto.Uint32(0)
		}
		if r.RetryTimeout != nil {
			p.RetryTimeout = proto.Bool(*r.RetryTimeout)
		}
		if r.RetrySystem != nil {
			p.RetrySystem = proto.Bool(*r.RetrySystem)
		}
		if r.MaxFails > 0 {
			p.MaxFails = proto.Uint32(uint32(r.MaxFails))
		}
		if r.InitialDelay != 0 {
			p.InitialDelay = durationpb.New(r.InitialDelay)
		}
		if r.Multiplier != 0 {
			p.Multiplier = proto.Float64(r.Multiplier)
		}
		if r.MaxDelay != 0 {
			p.MaxDelay = durationpb.New(r.MaxDelay)
		}
		out.Retry = p
	}
	return out, nil
}

// toValue converts a Go value to a protobuf Value: directly when structpb knows the type,
// else through its JSON encoding (structs, typed slices and maps, json.Marshalers).
func toValue(v any) (*structpb.Value, error) {
	if pv, err := structpb.NewValue(v); err == nil {
		return pv, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return nil, err
	}
	return structpb.NewValue(generic)
}

func toList(values []any) (*structpb.ListValue, error) {
	list := &structpb.ListValue{Values: make([]*structpb.Value, len(values))}
	for i, v := range values {
		pv, err := toValue(v)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		list.Values[i] = pv
	}
	return list, nil
}

func toStruct(m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		return nil, nil
	}
	out := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(m))}
	for k, v := range m {
		pv, err := toValue(v)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		out.Fields[k] = pv
	}
	return out, nil
}
