"""The real pieces of commsched: processes that enforce scheduling decisions on real hosts."""
