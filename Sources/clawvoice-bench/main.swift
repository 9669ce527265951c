print("clawvoice-bench: not yet")
