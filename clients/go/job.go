package worq

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	worqv1 "github.com/worq-dev/worq/gen/go/worq/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// JobState is where a job is in its lifecycle (docs/state-machine.md).
type JobState int32

// Job states.
const (
	StateUnspecified JobState = JobState(worqv1.JobState_JOB_STATE_UNSPECIFIED)
	StatePending     JobState = JobState(worqv1.JobState_JOB_STATE_PENDING)
	StateScheduled   JobState = JobState(worqv1.JobState_JOB_STATE_SCHEDULED)
	StateDelayed     JobState = JobState(worqv1.JobState_JOB_STATE_DELAYED)
	StateRunning     JobState = JobState(worqv1.JobState_JOB_STATE_RUNNING)
	StateRetrying    JobState = JobState(worqv1.JobState_JOB_STATE_RETRYING)
	StateCompleted   JobState = JobState(worqv1.JobState_JOB_STATE_COMPLETED)
	StateFailed      JobState = JobState(worqv1.JobState_JOB_STATE_FAILED)
	StateDeadLetter  JobState = JobState(worqv1.JobState_JOB_STATE_DEAD_LETTER)
	StateCancelled   JobState = JobState(worqv1.JobState_JOB_STATE_CANCELLED)
)

// String returns the state's name, e.g. "COMPLETED".
func (s JobState) String() string { return trimEnum(worqv1.JobState(s).String(), "JOB_STATE_") }

// Terminal reports whether the job has finished: COMPLETED, FAILED, DEAD_LETTER or CANCELLED.
func (s JobState) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateDeadLetter, StateCancelled:
		return true
	}
	return false
}

// FailureCategory classifies a failure.
type FailureCategory int32

// Failure categories.
const (
	CategoryUnspecified FailureCategory = FailureCategory(worqv1.FailureCategory_FAILURE_CATEGORY_UNSPECIFIED)
	CategoryTemporary   FailureCategory = FailureCategory(worqv1.FailureCategory_FAILURE_CATEGORY_TEMPORARY)
	CategoryPermanent   FailureCategory = FailureCategory(worqv1.FailureCategory_FAILURE_CATEGORY_PERMANENT)
	CategoryTimeout     FailureCategory = FailureCategory(worqv1.FailureCategory_FAILURE_CATEGORY_TIMEOUT)
	CategoryCancelled   FailureCategory = FailureCategory(worqv1.FailureCategory_FAILURE_CATEGORY_CANCELLED)
	CategorySystem      FailureCategory = FailureCategory(worqv1.FailureCategory_FAILURE_CATEGORY_SYSTEM)
)

// String returns the category's name, e.g. "PERMANENT".
func (c FailureCategory) String() string {
	return trimEnum(worqv1.FailureCategory(c).String(), "FAILURE_CATEGORY_")
}

// Failure records a job's failures: the last one's details and how many there were.
type Failure struct {
	Message    string
	ErrType    string
	Backtrace  []string
	Category   FailureCategory
	RetryCount int
	FailedAt   time.Time // first failure
	RetriedAt  time.Time // last failure
	Code       string    // the application error code (a PermanentError's Code); "" when none
	Cause      string    // what caused the last failure (the wrapped error's text); "" when none
}

// Progress is a running job's last progress report.
type Progress struct {
	Percent   int // 0 to 100
	Message   string
	UpdatedAt time.Time
}

// Job is a job as the server holds it. A handler receives one for the job it runs (with
// LeaseID and ExecutionDeadline set); GetJob, WaitResult and Run return one with State,
// Result and Failure filled in.
type Job struct {
	JID           string
	Type          string
	Queue         string
	Args          []any          // JSON values: numbers are float64
	Kwargs        map[string]any // nil when none were given
	Payload       []byte
	Custom        map[string]any
	Attempt       int // 1 for the first attempt; 0 before the first lease
	Priority      JobPriority
	Tags          map[string]string
	CorrelationID string
	// ReserveFor and ExecutionTimeout are the job's settings, defaults resolved.
	ReserveFor       time.Duration
	ExecutionTimeout time.Duration
	// Backtrace is how many failure frames the server keeps.
	Backtrace int

	State   JobState
	Result  []byte   // what the handler returned (COMPLETED jobs, from GetJob/WaitResult/Run)
	Failure *Failure // the last failure, if the job ever failed

	CreatedAt   time.Time
	CompletedAt time.Time
	ExpiresAt   time.Time // created + ttl

	IdempotencyKey string
	Group          string      // the job's group within its queue ("" the default group)
	UniqueKey      string      // the unique key the job took (derived when the submit left it empty)
	UniqueUntil    UniqueUntil // how long it is held; zero when the job is not unique
	DebounceKey    string
	BatchID        string // the batch the job belongs to ("" none)
	ParentJID      string
	// Traceparent and Tracestate are the producer's W3C trace context; empty when the job carries none.
	Traceparent string
	Tracestate  string
	DependsOn   []string // the jobs this one waits (or waited) for
	WaitingOn   []string // while PENDING: the dependencies not finished yet

	// Checkpoint is the last checkpoint a handler saved (see Checkpoint); empty when none.
	// A retry gets the one its earlier attempt saved: resume from there.
	Checkpoint []byte
	// Progress is what the handler of the current or last attempt last reported (see
	// ReportProgress); nil when none.
	Progress *Progress

	// LeaseID and ExecutionDeadline are set on jobs handed to a handler.
	LeaseID           string
	ExecutionDeadline time.Time

	// Proto is the job as received, for fields this struct does not carry.
	Proto *worqv1.Job
}

// DecodeResult unmarshals the job's JSON result into v.
func (j *Job) DecodeResult(v any) error {
	if len(j.Result) == 0 {
		return errors.New("worq: the job has no result")
	}
	return json.Unmarshal(j.Result, v)
}

// jobFromProto converts a server job.
func jobFromProto(p *worqv1.Job) *Job {
	if p == nil {
		return nil
	}
	j := &Job{
		JID:              p.GetJid(),
		Type:             p.GetType(),
		Queue:            p.GetQueue(),
		Payload:          p.GetPayload(),
		Attempt:          int(p.GetAttempt()),
		Priority:         JobPriority(p.GetPriority()),
		Tags:             p.GetTags(),
		CorrelationID:    p.GetCorrelationId(),
		ReserveFor:       durationOf(p.GetReserveFor()),
		ExecutionTimeout: durationOf(p.GetExecutionTimeout()),
		Backtrace:        int(p.GetBacktrace()),
		State:            JobState(p.GetState()),
		Result:           p.GetResult(),
		CreatedAt:        timeOf(p.GetCreatedAt()),
		CompletedAt:      timeOf(p.GetCompletedAt()),
		ExpiresAt:        timeOf(p.GetExpiresAt()),
		IdempotencyKey:   p.GetIdempotencyKey(),
		Group:            p.GetGroupKey(),
		Traceparent:      p.GetTrace().GetTraceparent(),
		Tracestate:       p.GetTrace().GetTracestate(),
		UniqueKey:        p.GetUniqueKey(),
		UniqueUntil:      UniqueUntil(p.GetUniqueUntil()),
		DebounceKey:      p.GetDebounceKey(),
		BatchID:          p.GetBatchId(),
		ParentJID:        p.GetParentJid(),
		DependsOn:        p.GetDependsOn(),
		WaitingOn:        p.GetWaitingOn(),
		Checkpoint:       p.GetCheckpoint(),
		Proto:            p,
	}
	if pr := p.GetProgress(); pr != nil {
		j.Progress = &Progress{Percent: int(pr.GetPercent()), Message: pr.GetMessage(), UpdatedAt: timeOf(pr.GetUpdatedAt())}
	}
	if p.GetArgs() != nil {
		j.Args = p.GetArgs().AsSlice()
	}
	if p.GetKwargs() != nil {
		j.Kwargs = p.GetKwargs().AsMap()
	}
	if p.GetCustom() != nil {
		j.Custom = p.GetCustom().AsMap()
	}
	if f := p.GetFailure(); f != nil {
		j.Failure = &Failure{
			Message:    f.GetMessage(),
			ErrType:    f.GetErrtype(),
			Backtrace:  f.GetBacktrace(),
			Category:   FailureCategory(f.GetCategory()),
			RetryCount: int(f.GetRetryCount()),
			FailedAt:   timeOf(f.GetFailedAt()),
			RetriedAt:  timeOf(f.GetRetriedAt()),
			Code:       f.GetCode(),
			Cause:      f.GetCause(),
		}
	}
	return j
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func durationOf(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}

func trimEnum(name, prefix string) string { return strings.TrimPrefix(name, prefix) }
