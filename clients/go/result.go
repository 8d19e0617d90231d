package worq

import (
	"encoding/json"
	"fmt"
)

// maxResultBytes is the server's limit on a stored result.
const maxResultBytes = 1 << 20

// EncodeResult turns a handler's return value into the bytes stored with the job: a
// []byte as it is, a string as its UTF-8 bytes, nil as no result, a json.RawMessage as it
// is, and anything else as its JSON encoding.
func EncodeResult(v any) ([]byte, error) {
	switch r := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return r, nil
	case string:
		return []byte(r), nil
	case json.RawMessage:
		return r, nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("worq: cannot encode the result (%T) as JSON: %w", v, err)
		}
		return b, nil
	}
}
