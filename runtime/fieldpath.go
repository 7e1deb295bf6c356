package runtime

import (
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// FieldPath turns a JSON pointer (/messages/3/content) into the contract's field path
// (messages[3].content), as details.field and configuration errors name fields.
func FieldPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 64); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}
