"""respond"""
