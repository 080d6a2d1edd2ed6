"""The database: where it is and whether it answers (`database`), the embedded server
(`embedded`, `supervisor`, `standby`, `backup`), the schema (`migrations`), the statements in
`sql/` (`queries`, `statements`), vectors by width (`vector_space`), the keyword extension
(`extension`, `keyword_engine`) and reads on replicas (`replicas`)."""
