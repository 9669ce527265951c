print("clawvoice")
