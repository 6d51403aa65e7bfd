"""Training loops: RL (GRPO family), SFT and preference (DPO / SimPO)."""
