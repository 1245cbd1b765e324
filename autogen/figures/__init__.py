"""The engines' own figures: what a binary is and reports of itself, what llama-fit-params
estimates for an exact command, what `swapgen calibrate` measured of one, and the bounded search
that lets sizing follow them. Below the commands, above the router: it runs the emitted commands."""
