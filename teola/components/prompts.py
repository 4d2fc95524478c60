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
