package nets

import (
	"fmt"

	G "gorgonia.org/gorgonia"
)

// buildMLP is flatten → (linear → ReLU) per hidden size → linear to the classes. Layers are named
// fc1, fc2, ...; the input node is already flat (B, C·H·W).
func buildMLP(b *builder, x *G.Node, s *Spec) *G.Node {
	for i, h := range s.Hidden {
		x = b.relu(b.linear(x, fmt.Sprintf("fc%d", i+1), h, true))
	}
	return b.linear(x, fmt.Sprintf("fc%d", len(s.Hidden)+1), s.Classes, true)
}
