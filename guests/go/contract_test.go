package sluice_test

import (
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	sluice "sluice.dev/guest"
)

// The Go side of the error contract: the SDK's codes, prefixes and error classes match
// wit/errors.json row for row, and a plain error becomes its "uncoded" form.
type contract struct {
	Codes []struct {
		Code string `json:"code"`
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"codes"`
	MessageForm string `json:"message_form"`
	Uncoded     struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"uncoded"`
}

func loadContract(t *testing.T) contract {
	t.Helper()
	b, err := os.ReadFile("../../wit/errors.json")
	if err != nil {
		t.Fatal(err)
	}
	var c contract
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("wit/errors.json: %v", err)
	}
	if len(c.Codes) == 0 {
		t.Fatal("wit/errors.json has no codes")
	}
	return c
}

func TestErrorTableMatchesWitErrorsJSON(t *testing.T) {
	c := loadContract(t)
	var want, got [][3]string
	for _, row := range c.Codes {
		want = append(want, [3]string{row.Code, row.Name, row.Type})
	}
	sentinels := map[sluice.Code]*sluice.Error{
		sluice.CodeResourceExhausted: sluice.ErrResourceExhausted,
		sluice.CodeDeadlineExceeded:  sluice.ErrDeadlineExceeded,
		sluice.CodeOverloaded:        sluice.ErrOverloaded,
		sluice.CodeNotFound:          sluice.ErrNotFound,
		sluice.CodeInvalidArgument:   sluice.ErrInvalidArgument,
		sluice.CodeUnavailable:       sluice.ErrUnavailable,
		sluice.CodeInternal:          sluice.ErrInternal,
	}
	for _, code := range sluice.Codes {
		e := sluice.NewError(code, "x")
		got = append(got, [3]string{string(code), code.Name(), e.Type()})
		if !errors.Is(e, sentinels[code]) {
			t.Errorf("%s: errors.Is does not match its sentinel", code)
		}
	}
	if len(sentinels) != len(sluice.Codes) {
		t.Errorf("%d sentinels for %d codes", len(sentinels), len(sluice.Codes))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Go SDK table\n%v\nwit/errors.json\n%v", got, want)
	}
}

func TestMessagesTakeTheCanonicalForm(t *testing.T) {
	c := loadContract(t)
	for _, code := range sluice.Codes {
		want := strings.NewReplacer("{name}", code.Name(), "{detail}", "bad 7").Replace(c.MessageForm)
		if got := sluice.Errorf(code, "bad %d", 7).Error(); got != want {
			t.Errorf("%s: %q, want %q", code, got, want)
		}
	}
	e := sluice.AsError(errors.New("boom"))
	want := strings.ReplaceAll(c.Uncoded.Message, "{message}", "boom")
	if string(e.Code) != c.Uncoded.Code || e.Message != want {
		t.Fatalf("a plain error became %#v, want %s %q", e, c.Uncoded.Code, want)
	}
}
