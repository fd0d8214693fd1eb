package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	sluice "sluice.dev/guest"
)

func TestHandleErrorBecomesGuestErrorWithExactFields(t *testing.T) {
	sluice.Register(sluice.HandlerFunc(func(_ context.Context, env *sluice.Envelope) ([]byte, error) {
		switch env.MsgType {
		case "fail":
			return nil, sluice.InvalidArgument("bad input")
		case "wrapped":
			return nil, fmt.Errorf("context: %w", sluice.ResourceExhausted("RESOURCE_EXHAUSTED: mailbox full (retry_after_ms=3)", 3))
		case "plain":
			return nil, errors.New("plain failure")
		}
		return env.Payload, nil
	}))
	if out, err := sluice.CallHandle(context.Background(), &sluice.Envelope{MsgType: "echo", Payload: []byte("hi")}); err != nil || string(out) != "hi" {
		t.Fatalf("echo: %q %v", out, err)
	}
	_, e := sluice.CallHandle(context.Background(), &sluice.Envelope{MsgType: "fail"})
	if e.Code != sluice.CodeInvalidArgument || e.Message != "bad input" {
		t.Fatalf("fail: %#v", e)
	}
	_, e = sluice.CallHandle(context.Background(), &sluice.Envelope{MsgType: "wrapped"})
	if e.Code != sluice.CodeResourceExhausted || *e.RetryAfterMs != 3 {
		t.Fatalf("wrapped: %#v", e)
	}
	_, e = sluice.CallHandle(context.Background(), &sluice.Envelope{MsgType: "plain"})
	if e.Code != sluice.CodeInternal || e.Message != "INTERNAL: plain failure" {
		t.Fatalf("plain: %#v", e)
	}
}

func TestToBytes(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{{[]byte("b"), "b"}, {"s", "s"}, {nil, ""}, {map[string]int{"a": 1}, `{"a":1}`}} {
		got, err := sluice.ToBytes(c.in)
		if err != nil || string(got) != c.want {
			t.Fatalf("%v: %q %v", c.in, got, err)
		}
	}
	if _, err := sluice.ToBytes(make(chan int)); !errors.Is(err, sluice.ErrInvalidArgument) {
		t.Fatalf("unmarshalable: %v", err)
	}
}
