-- The common words typo tolerance never corrects (`typo_words`, migration 0019): the service
-- keeps them to skip asking for a respelling that cannot change a question.
SELECT word FROM typo_words;
