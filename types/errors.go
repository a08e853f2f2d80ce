package types

import (
	"errors"
	"fmt"
)

// Class is the kind of a failure, as operators and core see it. Every error a
// verb or an operator command returns carries exactly one class; the command
// layer prints it and, for operator commands, turns it into an exit status.
type Class string

// The error classes of the project (docs/nodes.md). Their names follow the gRPC
// status codes an operator API would use.
const (
	Internal           Class = "internal"
	InvalidArgument    Class = "invalid_argument"
	NotFound           Class = "not_found"
	FailedPrecondition Class = "failed_precondition"
	Aborted            Class = "aborted"
	AlreadyExists      Class = "already_exists"
	Unavailable        Class = "unavailable"
	ResourceExhausted  Class = "resource_exhausted"
	PermissionDenied   Class = "permission_denied"
	Unauthenticated    Class = "unauthenticated"
	DataLoss           Class = "data_loss"
	DeadlineExceeded   Class = "deadline_exceeded"
	// OutcomeUnknown is a write that may have landed: its request may have
	// reached the store and its answer did not come back, and resolving it
	// did not fit in the call's budget. It is printed as
	// "unavailable: outcome unknown: ..." and is never retried blindly.
	OutcomeUnknown Class = "unavailable: outcome unknown"
)

// ExitCode is the status an operator command exits with for this class.
// Plugin verbs always exit 128, as core expects.
func (c Class) ExitCode() int {
	switch c {
	case InvalidArgument:
		return 2
	case NotFound:
		return 3
	case FailedPrecondition:
		return 4
	case Aborted:
		return 5
	case AlreadyExists:
		return 6
	case Unavailable:
		return 7
	case ResourceExhausted:
		return 8
	case PermissionDenied:
		return 9
	case Unauthenticated:
		return 10
	case DataLoss:
		return 11
	case DeadlineExceeded:
		return 12
	case OutcomeUnknown:
		return 13
	default:
		return 1
	}
}

// Error is a failure of a known class. Its message says what failed and why,
// without the class: the command layer prints the class in front of it.
type Error struct {
	Class Class
	Msg   string // the whole message, the cause's text included
	Err   error  // the cause, if any, for errors.Is and errors.As
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// Errorf builds an error of the given class. A %w verb in format wraps its
// argument as the cause.
func Errorf(class Class, format string, args ...any) error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Class: class, Msg: wrapped.Error(), Err: errors.Unwrap(wrapped)}
}

// Wrap gives err the class and a context: the message reads "what: cause".
// An err that already has a class keeps its message; the new class wins.
func Wrap(class Class, err error, what string) error {
	if err == nil {
		return nil
	}
	return &Error{Class: class, Msg: what + ": " + err.Error(), Err: err}
}

// Invalid is shorthand for Errorf(InvalidArgument, ...), the most common
// refusal of bad input.
func Invalid(format string, args ...any) error {
	return Errorf(InvalidArgument, format, args...)
}

// ClassOf reports the class of err: the class of the outermost *Error in its
// chain, Internal when there is none.
func ClassOf(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Internal
}
