"""The Gradio arena (issue: pairwise arena). Empty until then."""
