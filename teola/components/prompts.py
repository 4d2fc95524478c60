"""Default prompt texts of the built-in components (each overridable in node config)."""

# Small instruction-tuned models answer whatever question ends the user turn, so the expansion task
# comes after the question (measured with SmolLM2-135M: asked first, it answered the question).
EXPANSION_SYSTEM = "You write web search queries. You never answer questions."
EXPANSION = ("Write {n} short web search queries that would find the answer to this question. "
             "Reply only with a numbered list of {n} queries.")
QA = ("Answer the question using the context. Be concise and factual. "
      "If the context does not contain the answer, say so.")
REFINE = ("Refine the existing answer to the question using the new context. "
          "Keep what is correct, fix what the context contradicts, and stay concise.")
TREE_MERGE = "Combine the candidate answers into one concise, correct answer to the question."
JUDGE = ("Answer the question briefly. Then, on a new line, write SEARCH: YES if answering well needs "
         "up-to-date or specific facts you are unsure of, otherwise SEARCH: NO.")
SEARCH_ANSWER = "Answer the question using the search results. Be concise and cite facts from the results."
TOOL_PLAN = ("You can call these tools: {tools}. Write the tool calls needed to answer the question, "
             "one JSON object per line, like {{\"tool\": \"calculator\", \"args\": {{\"expression\": \"2*3\"}}}}. "
             "Write nothing else.")
TOOL_ANSWER = "Answer the question using the tool results."

# Synthesis prompts put the question after the context, where a small model looks for what to
# answer, and ask for one short sentence in the context's words: measured with SmolLM2-135M on 100
# NarrativeQA questions with their story as the context (`python -m bench.prompts --n 100 --only
# 3,4,11,12,13 --out prompts_100`, bench/results/prompts_100.md): "Answer in one short sentence."
# 24 decode tokens per answer, gold answer contained 15/100, token F1 0.138; with ", using words from
# the context." 25 tokens, 23/100, F1 0.151 (LlamaIndex's own template: 30 tokens, 16/100, 0.124).
# Question before the context (the first layout): 88 tokens, F1 0.036. The instruction stays first,
# so calls share it.
CONTEXT_LABEL = "Context:"
EXISTING_LABEL = "Existing answer:"
QUESTION_LABEL = "Question:"
ASK = "Answer in one short sentence, using words from the context."


def qa_parts(question, context, instruction=QA, existing=None, ask=ASK):
    """The prompt parts of one synthesis call, in order: the instruction, the context (and an
    existing answer to refine), the question, then `ask` (None or "" leaves it out). Parts are
    texts or Refs."""
    parts = [("instruction", instruction), ("context_label", CONTEXT_LABEL), ("context", context)]
    if existing is not None:
        parts += [("existing_label", EXISTING_LABEL), ("existing_answer", existing)]
    parts += [("question_label", QUESTION_LABEL), ("question", question)]
    if ask:
        parts.append(("ask", ask))
    return parts
